"""Print the bad-input corpus as a markdown table: each input, each surface, how it was answered.

Run: ``.venv/bin/python tests/reliability/report_bad_inputs.py > bad_inputs.md``

Then the table of bad operations (issue 13 item 14: PostgreSQL and a Chroma server are started when
installed) and one line of counts per corpus: typed error / accepted / crash.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.reliability.bad_inputs import main

if __name__ == "__main__":
    main()
