'use strict'
// What a skill could not do: an agent's mistake (missing items, a wrong station, a walk that timed out),
// which the world turns into an event with ok:false rather than a protocol error.

/** The skill could not be done; `reason` says why. Becomes an event with ok:false. */
class SkillFailure extends Error {
  constructor (reason) {
    super(reason)
    this.name = 'SkillFailure'
  }
}
const fail = reason => { throw new SkillFailure(reason) }

module.exports = { SkillFailure, fail }
