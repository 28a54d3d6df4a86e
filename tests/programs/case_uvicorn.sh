#!/usr/bin/env bash
# uvicorn --workers 2 (workers exec'd, inheriting the listener) with
# asgi_app.py: case_gunicorn.sh.
PYWEB=uvicorn exec "$(dirname "$0")/case_gunicorn.sh" "$@"
