#!/bin/sh
# A toolhost command hook: appends every call that reaches the hooks (before
# and after it runs) to an audit log, one JSON object per line, and never
# changes anything. Calls refused before the hooks (a policy deny, arguments
# that fail validation, a tool that does not exist) and calls an earlier
# before-hook blocks never reach it; the host records those decisions in the
# run's history (`host run --json`, `steps` of each call) and its log.
#
# The log is $TOOLHOST_AUDIT_LOG (default: toolhost-audit.log in the working
# directory). TOOLHOST_HOOK_EVENT and TOOLHOST_TOOL are set by the host.
set -u

log=${TOOLHOST_AUDIT_LOG:-toolhost-audit.log}
payload=$(cat)
printf '{"time":"%s","call":%s}\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$payload" >>"$log" || {
  echo "cannot write the audit log $log" >&2
  exit 1
}
exit 0
