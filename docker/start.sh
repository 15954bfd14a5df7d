#!/bin/sh
# The container's entry point.
#
#   (no arguments), serve [OPTIONS]   the memory service on every interface, port 6060
#   any other memorist command        run as is: `docker compose run --rm memorist keys list`
#
# A service reachable from other machines needs API keys (`memorist serve` refuses to
# run open on an address other than loopback). When the store holds no active key, the
# first start creates one for tenant $MEMORIST_FIRST_TENANT [default] and writes it to
# $MEMORIST_KEY_FILE [/data/api-key], readable by this user only; it is never logged.
# Create your own keys before the first start, and none is made:
#   docker compose run --rm memorist keys create --tenant acme
set -eu

if [ "$#" -eq 0 ]; then
    set -- serve
fi
if [ "$1" != serve ]; then
    exec memorist "$@"
fi
shift

key_file=${MEMORIST_KEY_FILE:-/data/api-key}
tenant=${MEMORIST_FIRST_TENANT:-default}

errors=$(mktemp)
trap 'rm -f "$errors"' EXIT
if ! listed=$(memorist keys list --active --json 2>"$errors"); then
    # No store yet is the first start (a SQLite file that is not there); any other
    # error (a damaged store, a database that refuses us) stops here, said as it is.
    if ! grep -q "no store at" "$errors"; then
        cat "$errors" >&2
        exit 1
    fi
    listed="[]"
fi
case "$listed" in
*'"key_id"'*) ;;
*)
    (
        umask 077
        if ! memorist keys create --tenant "$tenant" --label "first start of the container" >"$key_file.new" 2>"$errors"; then
            cat "$errors" >&2
            rm -f "$key_file.new"
            exit 1
        fi
        mv "$key_file.new" "$key_file"
    )
    echo "memorist: the store held no API key, so one was made for tenant '$tenant' and written to $key_file" \
        "(docker exec <container> cat $key_file, or docker compose exec memorist cat $key_file);" \
        "requests send it as 'Authorization: Bearer <key>'." >&2
    ;;
esac

rm -f "$errors"
trap - EXIT
exec memorist serve --host 0.0.0.0 --port 6060 "$@"
