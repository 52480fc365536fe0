-- What the pre-run check said of a run that was started anyway (its
-- criteria could not all be judged: no baseline for a relative criterion,
-- a baseline of another shape or host, too few requests for a percentile):
-- a JSON list of {kind, criterion, message}, kept with the run and shown on
-- its page. NULL: nothing was said.
ALTER TABLE runs ADD COLUMN warnings jsonb;
