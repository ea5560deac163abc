from tui.app import run_console

run_console()
