#!/bin/sh
# A toolhost command hook: appends every call (before and after) to an audit
# log, one JSON object per line, and never changes anything.
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
