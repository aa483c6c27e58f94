"""Follow-up tasks N days after a purchase, per user, with history and cancel.

See README.md next to this file; ``app.py`` holds the duetime app and the task operations.
"""
