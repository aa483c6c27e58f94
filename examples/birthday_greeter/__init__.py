"""A birthday greeting at 09:00 local time on each user's birthday, every year.

See README.md next to this file; ``app.py`` holds the duetime app, ``greetings.py`` the rules.
"""
