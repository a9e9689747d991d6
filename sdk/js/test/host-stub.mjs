// The host's functions, recorded for unit tests (see register.mjs).
export const calls = [];
export const configValues = new Map();
export function log(level, message) {
  calls.push(["log", level, message]);
}
export function getConfig(key) {
  return configValues.get(key);
}
export function configKeys() {
  return [...configValues.keys()];
}
export function progress(message, fraction) {
  calls.push(["progress", message, fraction]);
}
