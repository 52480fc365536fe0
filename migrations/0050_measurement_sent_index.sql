-- When each sample's request was sent, for drift criteria (acceptance
-- Measurement.SentIndex): the samples of a probe's request metric are
-- stored in send order, and sent_index holds, as little-endian int64s,
-- the index of the first sample of each second of the repetition. NULL
-- where unknown (imports of other tools, histograms, older runs).
ALTER TABLE measurements ADD COLUMN sent_index bytea;
ALTER TABLE measurements ALTER COLUMN sent_index SET STORAGE EXTERNAL;
