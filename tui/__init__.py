"""`lactchain-tui`: the LactChain lab console (Textual).

Layout follows frogmouth: `app.py` (the App and `main`), `screens/` (one module per
screen), `widgets/` (reusable widgets), plus small non-UI helpers that wrap the
library (`registry_client`, `models`, `lab_session`, `jobs_bridge`). The library
never imports this package; this package imports the library lazily where the
import is heavy (torch, transformers) so the first screen paints fast.
"""
