-- pglog store, version 5: the query templates as a stable view, so reports and dashboards show
-- a template's normalized text without reading the table behind it. See docs/store.md.
-- Applied by collector/src/store/migrate.ts inside its transaction: no BEGIN/COMMIT here.
-- Released migrations are never edited: add a new file.

-- One row per fingerprint: the template's text with its literals replaced (as pglog's
-- normalizer wrote it when the template was first seen) and when it was first and last seen.
CREATE VIEW pglog.templates AS
  SELECT fingerprint, normalized, first_seen, last_seen
  FROM pglog.query_templates;
