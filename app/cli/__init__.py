"""The ``mapper`` command, for people and CI jobs.

``mapper tune`` searches in-process, or on a service with ``--server URL`` (``TM_SERVER``) with the
same output; several ``--target``s make a comparison, one row per target. ``mapper serve`` starts
the service (API and workers), ``mapper worker`` one more worker; ``status``, ``watch`` and
``cancel`` follow and stop the service's jobs; ``targets`` and ``workloads`` list what can be tuned;
``evaluate FILE`` prices a point (the target's parameters or its own knobs) or a mapping, ``validate FILE`` runs a
mapping in the executor, both here and without the service's limits.

Standard output carries the result (tables, or JSON with ``--json``); job ids, progress bars (on a
terminal only), failure reasons and baseline verdicts go to standard error.

Exit codes (when several apply, the smallest wins):

    0  ok
    2  usage error or bad problem: a malformed problem, file or flag, an unknown target, an error
       answer of the server (its detail and hint on one line), an unreachable server
    3  no feasible mapping, a failed validation (any layer, any target), or the job failed
    4  the search or the job was cancelled
    5  timed out: --wait ran out before the server's job finished (the job keeps running; its id
       is printed)
    6  regression: a tuned cost is worse than the --baseline file's by more than --tolerance
  130  interrupted: a second Ctrl-C in-process (the first stops the search and keeps its best: 4),
       or Ctrl-C while following a server's job (which keeps running)

The codes are those of ``tune`` and ``watch``; ``status``, ``cancel`` and the lists exit 0 or 2.
Errors a user can fix print one line ``error: ...`` and never a traceback.
"""

from app.cli import evaluate_cmd, validate_cmd  # register `mapper evaluate` and `mapper validate` on the app
from app.cli.commands import app, main
from app.cli.common import EXIT_CODES
from app.cli.inputs import parse_overrides, read_problem_file

__all__ = ["EXIT_CODES", "app", "evaluate_cmd", "main", "parse_overrides", "read_problem_file", "validate_cmd"]
