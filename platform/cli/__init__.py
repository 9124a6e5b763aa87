"""The mlpilot command line (Typer). See ``mlpilot --help``."""

import time

#: when this command started (imported first by the entry point): ``mlpilot run``'s time
#: budget counts from here, so the interpreter's and libraries' start-up count too
INVOKED_AT = time.time()
