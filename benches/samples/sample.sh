#!/usr/bin/env bash
#
# backup.sh - rotate and upload nightly database backups.
#
# Usage: backup.sh [-n] [-k KEEP] [-d DEST] DATABASE...
#   -n       dry run: print what would happen
#   -k KEEP  number of local backups to keep (default: 7)
#   -d DEST  remote destination, e.g. s3://bucket/prefix
#
set -euo pipefail

readonly SCRIPT_NAME="${0##*/}"
readonly BACKUP_DIR="${BACKUP_DIR:-/var/backups/db}"
readonly TIMESTAMP="$(date +%Y%m%d-%H%M%S)"

KEEP=7
DEST=""
DRY_RUN=0
declare -a FAILED=()

log() {
    local level="$1"; shift
    printf '%s [%s] %s: %s\n' "$(date '+%F %T')" "$level" "$SCRIPT_NAME" "$*" >&2
}

die() {
    log error "$@"
    exit 1
}

usage() {
    sed -n '3,9p' "$0" | sed 's/^# \{0,1\}//'
    exit "${1:-0}"
}

run() {
    if (( DRY_RUN )); then
        echo "+ $*"
    else
        "$@"
    fi
}

require_cmd() {
    local cmd
    for cmd in "$@"; do
        command -v "$cmd" >/dev/null 2>&1 || die "required command not found: $cmd"
    done
}

# Dump one database to a compressed file and print its path.
dump_database() {
    local db="$1"
    local out="${BACKUP_DIR}/${db}-${TIMESTAMP}.sql.gz"

    log info "dumping ${db} -> ${out}"
    if (( DRY_RUN )); then
        echo "$out"
        return 0
    fi
    if ! pg_dump --no-owner --format=plain "$db" | gzip -9 > "${out}.partial"; then
        rm -f "${out}.partial"
        return 1
    fi
    mv "${out}.partial" "$out"
    echo "$out"
}

# Remove all but the newest $KEEP backups for a database.
rotate() {
    local db="$1" count=0 file
    while IFS= read -r file; do
        count=$((count + 1))
        if [[ $count -gt $KEEP ]]; then
            log info "removing old backup ${file##*/}"
            run rm -f -- "$file"
        fi
    done < <(ls -1t "${BACKUP_DIR}/${db}-"*.sql.gz 2>/dev/null || true)
}

upload() {
    local file="$1"
    [[ -z "$DEST" ]] && return 0
    case "$DEST" in
        s3://*)
            run aws s3 cp --only-show-errors "$file" "${DEST%/}/${file##*/}"
            ;;
        gs://*)
            run gsutil -q cp "$file" "${DEST%/}/"
            ;;
        *)
            run rsync -a "$file" "$DEST"
            ;;
    esac
}

cleanup() {
    local rc=$?
    find "$BACKUP_DIR" -name '*.partial' -mmin +60 -delete 2>/dev/null || true
    if (( ${#FAILED[@]} > 0 )); then
        log warn "failed databases: ${FAILED[*]}"
    fi
    exit "$rc"
}

main() {
    local opt
    while getopts ":nk:d:h" opt; do
        case "$opt" in
            n) DRY_RUN=1 ;;
            k) KEEP="$OPTARG" ;;
            d) DEST="$OPTARG" ;;
            h) usage 0 ;;
            :) die "option -$OPTARG needs an argument" ;;
            \?) usage 2 ;;
        esac
    done
    shift $((OPTIND - 1))

    [[ $# -ge 1 ]] || usage 2
    [[ "$KEEP" =~ ^[0-9]+$ ]] || die "KEEP must be a number, got '$KEEP'"

    require_cmd pg_dump gzip
    mkdir -p "$BACKUP_DIR"
    trap cleanup EXIT

    local db file
    for db in "$@"; do
        if file=$(dump_database "$db"); then
            upload "$file" || FAILED+=("$db (upload)")
            rotate "$db"
        else
            FAILED+=("$db")
        fi
    done

    log info "done: $(( $# - ${#FAILED[@]} ))/$# databases backed up"
    [[ ${#FAILED[@]} -eq 0 ]]
}

main "$@"
