# Sourced by ./duetime and ./test: make sure .venv holds duetime and what it needs.
# Installs on first use and again whenever pyproject.toml changes; otherwise costs nothing.
#
# .venv runs the OLDEST supported Python (3.11, the floor in pyproject.toml), so what works here
# works everywhere duetime installs; ./test also checks the newest one in a venv of its own (see
# newer_python below). A machine without 3.11 falls back to the oldest newer Python it has.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$here/.venv"
# `server` always: ./duetime runs the command line, which needs it.
extras="server,${DUETIME_EXTRAS:-postgres,brokers,kafka,otel,test}"
oldest_supported=3.11
newer_supported=(3.13 3.12)

find_python() {
    # A Python $1 (e.g. 3.13) that runs: on PATH, or one pyenv installed but did not activate.
    local candidate
    for candidate in "python$1" "${PYENV_ROOT:-$HOME/.pyenv}/versions/$1"*/bin/"python$1"; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c '' 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    return 1
}

oldest_python() {
    local version
    for version in "$oldest_supported" "${newer_supported[@]}"; do
        find_python "$version" && return 0
    done
    echo "duetime needs Python $oldest_supported or newer on PATH" >&2
    return 1
}

newer_python() {
    # The newest supported Python besides the oldest, or nothing (status 1) when there is none.
    local version
    for version in "${newer_supported[@]}"; do
        find_python "$version" && return 0
    done
    return 1
}

prepare_venv() {
    # prepare_venv DIR LABEL PICK: DIR holds duetime with $extras, on the Python that the
    # function PICK prints; LABEL goes into the stamp, so a venv of another Python is rebuilt.
    local dir="$1" label="$2" pick="$3" python wanted
    wanted="$(cksum <"$here/pyproject.toml" | cut -d' ' -f1)-$extras-$label"
    if [ -x "$dir/bin/python" ] && [ "$(cat "$dir/.duetime-installed" 2>/dev/null)" = "$wanted" ]; then
        return 0
    fi
    python="$("$pick")"
    echo "duetime: preparing $dir on $("$python" -V 2>&1) (first use or dependencies changed)..." >&2
    if [ ! -x "$dir/bin/python" ] ||
        [ "$("$dir/bin/python" -V 2>&1)" != "$("$python" -V 2>&1)" ]; then
        "$python" -m venv --clear "$dir"
    fi
    "$dir/bin/python" -m pip install --quiet --upgrade pip >&2
    "$dir/bin/python" -m pip install --quiet -e "$here[$extras]" >&2
    echo "$wanted" >"$dir/.duetime-installed"
}

prepare_venv "$venv" oldest oldest_python
