"""`python -m rocketstore.cli`: the same as the `rocketstore` console script."""

from rocketstore.cli.main import main

if __name__ == "__main__":
    main()
