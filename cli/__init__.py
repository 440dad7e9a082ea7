"""The `prc-emu` command line: one registry of commands (cli.main), each a
thin layer of argument parsing over the packages below."""
