"""The command line's commands, one module per command or group; ``assay.cli`` assembles them."""
