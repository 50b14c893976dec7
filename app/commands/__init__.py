"""One module per `ember` subcommand: add_arguments(parser) and run(args) -> exit code."""
