'use strict'
// Logging goes to stderr only: stdout carries the single READY line the supervisor waits for.

/**
 * Make a logger `log(scope, message)`. `sink` receives each finished line (without newline);
 * by default lines go to stderr. Tests pass an array-backed sink to assert on world edits.
 */
function createLogger (sink) {
  const write = sink || (line => process.stderr.write(line + '\n'))
  return (scope, message) => write(`${new Date().toISOString()} [${scope}] ${message}`)
}

module.exports = { createLogger }
