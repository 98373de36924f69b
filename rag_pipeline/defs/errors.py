"""Why Dagster could not take a pass's documents; apart from the modules that raise them, so
that catching them (the CLI) does not import Dagster."""


class RunsInProgress(Exception):
    """Runs of the workspace are queued or in progress: another plan's documents."""


class NoDaemon(Exception):
    """Queued runs are waiting and no ``dagster-daemon`` runs to start them."""
