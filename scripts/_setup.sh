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
    .venv/bin/python -m pip install -q -c constraints.txt -e ".${1:+[$1]}"
}

# The web interface: the OpenList frontend's built files, fetched from the npm registry
# at the pinned version and checked against the registry's recorded digest, then placed
# in web/dist, where `manifold server` serves them. Never part of the repository.
FRONTEND_PACKAGE="@openlist-frontend/openlist-frontend"
FRONTEND_VERSION="4.2.6"
FRONTEND_INTEGRITY="sha512-ebWZEFHyBcQzNcaa8vE6U5LaCHAYblrUzOErGr+N/DBuFqnjBk7AqaPEAiJIbANSb+uu32KPxgc9pY8lF+NZ9w=="

fetch_frontend() {
    if [ -f web/dist/index.html ] && [ "$(cat web/dist/VERSION 2>/dev/null)" = "v$FRONTEND_VERSION" ]; then
        return 0
    fi
    # Node.js from any source will do; Debian's packages only where there is none, since
    # Debian's npm conflicts with other builds of nodejs that carry their own npm.
    command -v npm >/dev/null 2>&1 || apt_install nodejs npm
    local work
    work=$(mktemp -d)
    echo "fetching the web interface ($FRONTEND_PACKAGE $FRONTEND_VERSION)"
    (cd "$work" && npm pack --silent "$FRONTEND_PACKAGE@$FRONTEND_VERSION" >/dev/null 2>&1)
    local tarball digest
    tarball=$(ls "$work"/*.tgz)
    digest=$(python3 -c 'import base64, hashlib, sys
print("sha512-" + base64.b64encode(hashlib.sha512(open(sys.argv[1], "rb").read()).digest()).decode())' "$tarball")
    if [ "$digest" != "$FRONTEND_INTEGRITY" ]; then
        echo "the web interface package does not match its recorded digest" >&2
        rm -rf "$work"
        return 1
    fi
    tar xzf "$tarball" -C "$work"
    mkdir -p web
    rm -rf web/dist.new
    mv "$work/package/dist" web/dist.new
    rm -rf web/dist
    mv web/dist.new web/dist
    rm -rf "$work"
}
