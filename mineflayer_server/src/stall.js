'use strict'
// Stalls of this process: spans in which it ran nothing for much longer than it should have. Skills run on
// wall-clock budgets, so a process stopped (SIGSTOP), a machine paused (a VM or laptop suspended) or an
// event loop starved for seconds lets budgets run out with no fault of the agents; such a failure must be
// reported as what it is (ops.js: `Stalled`), never as the agents' failure.
//
// A timer ticks every TICK_MS. A tick that comes STALL_MS or more late is a stall:
// - measured on the monotonic clock (performance.now()), it is an event loop that did not run: blocked,
//   starved of CPU, or the process stopped;
// - measured on the wall clock (Date.now()) while the monotonic clock saw less, it is a pause of the whole
//   machine (the monotonic clock stands still while a machine is suspended; the wall clock does not).
// `check()` may also be called at any moment (before a failure is judged): it measures the time since the
// last tick, so a stall is seen even if the judging code runs before the late tick.

const { performance } = require('perf_hooks')

const TICK_MS = 100
/** How late a tick must be to count as a stall: longer than any pause a busy machine makes otherwise. */
const STALL_MS = 3000
/** How many stalls are remembered (older ones end before any episode still running began). */
const KEEP = 64

class StallMonitor {
  /**
   * @param o.log `log(scope, message)`; each stall is logged once
   * @param o.stallMs, o.tickMs as STALL_MS and TICK_MS; o.clocks `{monotonic(), wall()}` in ms (tests)
   */
  constructor ({ log = () => {}, stallMs = STALL_MS, tickMs = TICK_MS, clocks = { monotonic: () => performance.now(), wall: () => Date.now() } } = {}) {
    Object.assign(this, { log, stallMs, tickMs, clocks })
    this.stalls = [] // {start, end (monotonic ms), ms, kind}
    this.lastMonotonic = clocks.monotonic()
    this.lastWall = clocks.wall()
    this.timer = null
  }

  start () {
    if (!this.timer) {
      this.timer = setInterval(() => this.check(), this.tickMs)
      this.timer.unref()
    }
    return this
  }

  stop () {
    if (this.timer) clearInterval(this.timer)
    this.timer = null
  }

  /** The monotonic time now, after noting any stall up to it (the clock `since` takes). */
  now () {
    this.check()
    return this.lastMonotonic
  }

  /** Note a stall if the time since the last check is STALL_MS or more beyond a tick. */
  check () {
    const monotonic = this.clocks.monotonic()
    const wall = this.clocks.wall()
    const ranMonotonic = monotonic - this.lastMonotonic
    const ranWall = wall - this.lastWall
    const late = Math.max(ranMonotonic, ranWall) - this.tickMs
    if (late >= this.stallMs) {
      const paused = ranWall - ranMonotonic >= this.stallMs
      const kind = paused ? 'the machine was paused (the wall clock ran on while the monotonic clock stood still)'
        : 'the process ran nothing (stopped, e.g. SIGSTOP, or its event loop blocked or starved of CPU)'
      // a pause shows only on the wall clock: it is placed at the end of the monotonic span, where it was noticed
      const stall = { start: paused ? this.lastMonotonic : monotonic - late, end: monotonic, ms: Math.round(late), kind }
      this.stalls.push(stall)
      if (this.stalls.length > KEEP) this.stalls.shift()
      this.log('stall', `${(late / 1000).toFixed(1)} s without running: ${kind}`)
    }
    this.lastMonotonic = monotonic
    this.lastWall = wall
  }

  /** The stalls that ended after monotonic time `t` (`now()`), checking first; [] when none. */
  since (t) {
    this.check()
    return this.stalls.filter(s => s.end > t)
  }
}

/** One line for a fault message: how long, how many and what kind of stalls. */
function describeStalls (stalls) {
  const total = stalls.reduce((n, s) => n + s.ms, 0)
  const kinds = [...new Set(stalls.map(s => s.kind))].join('; ')
  return `${stalls.length === 1 ? 'a stall' : `${stalls.length} stalls`} of ${(total / 1000).toFixed(1)} s (${kinds})`
}

module.exports = { StallMonitor, describeStalls, STALL_MS, TICK_MS }
