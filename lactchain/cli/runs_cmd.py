"""`lactchain runs ...` (placeholder until the registry lands)."""
import typer

app = typer.Typer(help="Browse the run registry.", no_args_is_help=True)
