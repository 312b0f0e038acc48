"""`python -m rocketstore.broker STORE ...`: same as `rocketstore serve`."""

from rocketstore.cli.serve import serve

if __name__ == "__main__":
    serve(prog_name="python -m rocketstore.broker")
