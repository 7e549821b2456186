# Shared by scripts/start and scripts/test: Debian packages and the Python environment.
# shellcheck shell=bash

as_root() {
    if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# Install the Debian packages named in "$@" that are not installed yet.
apt_install() {
    local missing=()
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing Debian packages: ${missing[*]}"
    as_root apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}"
}

pick_python() {
    for candidate in python3.13 python3.12 python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 \
            && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    echo "Python 3.11 or newer is needed" >&2
    return 1
}

# Create .venv and install Manifold into it, with the extras named in $1 (may be empty).
python_env() {
    local python
    python=$(pick_python)
    if ! "$python" -c 'import venv, ensurepip' 2>/dev/null; then
        apt_install python3-venv
    fi
    [ -x .venv/bin/python ] || "$python" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -e ".${1:+[$1]}"
}
