"""One module per command of `python -m clients`; each exposes `async def run(args, settings) -> int`."""
