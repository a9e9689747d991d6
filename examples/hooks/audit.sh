#!/bin/sh
# A toolhost command hook: appends every attempt to call a tool to an audit
# log, one JSON object per line, and never changes anything. As an after-hook
# it sees every outcome: a result, a failure, and a call refused before it
# ran (a policy deny, arguments that fail validation, a before-hook's block,
# an approval refused), whose outcome kind says so ("permission-denied",
# "invalid-arguments", "blocked-by-hook"); what an after-hook answers to a
# refusal never changes it. Only a call to a tool that does not exist reaches
# no hook (it names no plugin); the host logs it.
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
