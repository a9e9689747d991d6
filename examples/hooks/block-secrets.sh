#!/bin/sh
# A toolhost command hook: refuses to let `read_file` read secrets.
#
# The host writes the call as one line of compact JSON on stdin, e.g.
#   {"event":"before_execute","tool":"read_file","plugin":"fs",...,"args":{"path":".env"},...}
# Exit 0 with nothing on stdout lets the call run; exit 2 blocks it and the
# text on stderr is the reason the model reads. POSIX sh, grep and sed only.
set -u

payload=$(cat)

# The event and the tool are the first two keys, in this order.
event=$(printf '%s\n' "$payload" | sed -n 's/^{"event":"\([^"]*\)".*/\1/p')
tool=$(printf '%s\n' "$payload" | sed -n 's/^{"event":"[^"]*","tool":"\([^"]*\)".*/\1/p')

[ "$event" = "before_execute" ] || exit 0
[ "$tool" = "read_file" ] || exit 0

# The JSON is serde_json's canonical form: compact, and only quotes,
# backslashes and control characters are escaped, so `.env` and `id_rsa`
# appear as they are. The value runs to the first quote not escaped.
path=$(printf '%s\n' "$payload" | sed -En 's/.*"args":\{.*"path":"(([^"\\]|\\.)*)".*/\1/p')
case "$path" in
  *.env* | *id_rsa*)
    echo "reading \"$path\" is not allowed: it may hold secrets (.env files and SSH keys are off limits)" >&2
    exit 2
    ;;
esac
exit 0
