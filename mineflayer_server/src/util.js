'use strict'
// Small async helpers shared by the sidecar, the world and the skills.

/**
 * How long a bot waits for the server to answer one request: a window to open, a click or a toss to be
 * applied, a barrier's reply, the blocks of a reset to reach its view. A healthy server answers in
 * milliseconds; on a machine busy with other work a reply took over 5 s. Longer stalls are faults.
 */
const REPLY_MS = 15000

/** Resolve after `ms` milliseconds. */
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

/** Error raised when an awaited action takes longer than its budget. */
class TimeoutError extends Error {
  constructor (what, ms) {
    super(`timed out after ${ms} ms: ${what}`)
    this.name = 'TimeoutError'
  }
}

/** Race `promise` against a timer; the timer is always cleared so it never keeps the process alive. */
function withTimeout (promise, ms, what) {
  let timer
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => reject(new TimeoutError(what, ms)), ms)
  })
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer))
}

/** Poll `predicate` every `stepMs` until it is truthy; throws TimeoutError after `ms`. */
async function waitFor (predicate, ms, what, stepMs = 10) {
  const start = Date.now()
  for (;;) {
    const value = await predicate()
    if (value) return value
    if (Date.now() - start > ms) throw new TimeoutError(what, ms)
    await sleep(stepMs)
  }
}

/**
 * A FIFO lock: `run(fn)` starts `fn` after every earlier `run` has settled.
 * Used to serialize skills per bot and replies on the ZeroMQ socket.
 */
class SerialQueue {
  constructor () { this.tail = Promise.resolve() }
  run (fn) {
    const result = this.tail.then(fn, fn)
    this.tail = result.then(() => {}, () => {})
    return result
  }
}

/**
 * GENCOORD_TIMEOUT_SCALE (a number >= 1, default 1): the startup and liveness deadlines (a bot's spawn, the
 * server's keep-alive kick; opening an arena, a reset and the sidecar's READY on the Python side) multiplied by
 * it, for a machine known to be loaded (a test suite beside other jobs), where an event loop starved for half a
 * minute is not a dead client. The Python side reads the same variable; the sidecar inherits it.
 */
function timeoutScale () {
  const scale = Number(process.env.GENCOORD_TIMEOUT_SCALE || 1)
  return Number.isFinite(scale) && scale >= 1 ? scale : 1
}

module.exports = { sleep, withTimeout, waitFor, TimeoutError, SerialQueue, REPLY_MS, timeoutScale }
