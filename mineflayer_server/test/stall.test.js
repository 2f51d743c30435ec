'use strict'
// The stall monitor on clocks the test moves: a late tick on the monotonic clock is a process that ran
// nothing, one on the wall clock alone a paused machine; ordinary jitter is neither.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { StallMonitor, describeStalls, STALL_MS } = require('../src/stall')

function clocks () {
  const c = { mono: 1000, wall: 1_700_000_000_000 }
  return { c, clocks: { monotonic: () => c.mono, wall: () => c.wall } }
}

test('a tick late on the monotonic clock is a stall of the process; jitter is not', () => {
  const { c, clocks: k } = clocks()
  const lines = []
  const m = new StallMonitor({ clocks: k, log: (scope, msg) => lines.push(`[${scope}] ${msg}`) })
  const start = m.now()
  c.mono += 100 + STALL_MS - 1; c.wall += 100 + STALL_MS - 1 // just under: a busy machine's hiccup
  assert.deepEqual(m.since(start), [])
  c.mono += 20100; c.wall += 20100 // SIGSTOP for 20 s: both clocks ran, nothing ran here
  const [stall] = m.since(start)
  assert.equal(stall.ms, 20000)
  assert.match(stall.kind, /^the process ran nothing \(stopped, e\.g\. SIGSTOP/)
  assert.deepEqual(lines, ['[stall] 20.0 s without running: ' + stall.kind])
  assert.deepEqual(m.since(m.now()), []) // a later episode did not cross it
  assert.match(describeStalls([stall]), /^a stall of 20\.0 s \(the process ran nothing/)
})

test('the wall clock running ahead of the monotonic one is a paused machine', () => {
  const { c, clocks: k } = clocks()
  const m = new StallMonitor({ clocks: k })
  const start = m.now()
  c.mono += 100; c.wall += 60100 // suspended for a minute: the monotonic clock stood still
  const [stall] = m.since(start)
  assert.equal(stall.ms, 60000)
  assert.match(stall.kind, /^the machine was paused/)
})
