#!/bin/sh
# A toolhost permission hook: answers the routine asks about reading
# documentation, so nobody has to, and passes every other ask on to the
# person. Configure it with `stages = ["permission"]`.
#
# At a permission request the host writes the call as one line of compact
# JSON on stdin, with why it is asked, e.g.
#   {"event":"permission_request","tool":"read_file",...,"args":{"path":"README.md"},...,"reasons":["..."]}
# It answers {"decision":"allow"|"deny"|"pass","reason":"..."} on stdout;
# nothing on stdout passes. POSIX sh and sed only.
set -u

payload=$(cat)
event=$(printf '%s\n' "$payload" | sed -n 's/^{"event":"\([^"]*\)".*/\1/p')
[ "$event" = "permission_request" ] || exit 0

path=$(printf '%s\n' "$payload" | sed -En 's/.*"args":\{.*"path":"(([^"\\]|\\.)*)".*/\1/p')
case "$path" in
  *..*) exit 0 ;;  # anything climbing out: the person decides
  *.md | docs/*)
    echo '{"decision":"allow","reason":"documentation is public"}'
    ;;
esac
exit 0
