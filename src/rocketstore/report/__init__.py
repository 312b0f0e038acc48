"""Reports on a store: consistency findings (`verify`), annotated file dumps (`dump`), the HTML report
(`html`, a Spark job) and the demo pipeline (`demo`).

An adapter layer beside `spark` and `cli`: every byte is decoded with the codecs of `rocketstore.format`
and every file is opened read-only (except the demo, which writes a store of its own).
"""
