# Sourced by ./duetime and ./test: make sure .venv holds duetime and what it needs.
# Installs on first use and again whenever pyproject.toml changes; otherwise costs nothing.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$here/.venv"
# `server` always: ./duetime runs the command line, which needs it.
extras="server,${DUETIME_EXTRAS:-postgres,brokers,kafka,otel,test}"

pick_python() {
    for candidate in python3.13 python3.12 python3.11 python3 python; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    echo "duetime needs Python 3.11 or newer on PATH" >&2
    return 1
}

stamp_wanted="$(cat "$here/pyproject.toml" | cksum | cut -d' ' -f1)-$extras"
stamp_file="$venv/.duetime-installed"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$stamp_file" 2>/dev/null)" != "$stamp_wanted" ]; then
    python="$(pick_python)"
    echo "duetime: preparing $venv (first use or dependencies changed)..." >&2
    [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip >&2
    "$venv/bin/python" -m pip install --quiet -e "$here[$extras]" >&2
    echo "$stamp_wanted" >"$stamp_file"
fi
