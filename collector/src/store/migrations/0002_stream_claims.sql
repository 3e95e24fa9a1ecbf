-- pglog store, version 2: stream ownership claims (fencing tokens) and the logged timestamp
-- text of entries whose time zone could not be converted. See docs/store.md.
-- Applied by collector/src/store/migrate.ts inside its transaction: no BEGIN/COMMIT here.

-- Who may commit a stream (a target's instance): the owner holding the highest assignment
-- epoch. A stream starts by claiming it (standalone: stored epoch + 1; cluster: the shard's
-- epoch); every commit locks the claims of its streams (FOR UPDATE, in key order) and leaves
-- out the streams whose claim holds another epoch. Kept apart from read_position_state
-- because a stream is claimed before anything of it has been committed.
CREATE TABLE pglog.stream_claims (
  target     text        NOT NULL,
  instance   text        NOT NULL,
  epoch      int8        NOT NULL CHECK (epoch >= 0),
  claimed_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (target, instance)
);

-- Positions committed before this table existed keep their owner's epoch.
INSERT INTO pglog.stream_claims (target, instance, epoch, claimed_at)
  SELECT target, instance, epoch, updated_at FROM pglog.read_position_state;

-- The timestamp as logged when it could not be converted to an instant (an unknown or
-- ambiguous zone abbreviation, no zone at all), or '' when the entry had none: ts then holds
-- the time pglog read the entry. NULL for every entry whose ts is the logged time.
ALTER TABLE pglog.statement_events ADD COLUMN ts_logged text;
ALTER TABLE pglog.error_events     ADD COLUMN ts_logged text;
ALTER TABLE pglog.lock_wait_events ADD COLUMN ts_logged text;
ALTER TABLE pglog.other_events     ADD COLUMN ts_logged text;
