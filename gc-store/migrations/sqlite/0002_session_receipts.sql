-- Receipts of session resources' manifests, beside those of Pods' archives: the object's
-- apiVersion and kind (a Pod's: v1, Pod), the session id its label carried and the instant of
-- the run that archived it (both NULL for a Pod).
ALTER TABLE gc_receipts ADD COLUMN api_version TEXT NOT NULL DEFAULT 'v1';
ALTER TABLE gc_receipts ADD COLUMN kind TEXT NOT NULL DEFAULT 'Pod';
ALTER TABLE gc_receipts ADD COLUMN session TEXT;
ALTER TABLE gc_receipts ADD COLUMN run_at TEXT;
-- A claim's volume kept by setting it to Retain before the claim was deleted: its name and the
-- reclaim policy it had (NULL when none was kept).
ALTER TABLE gc_receipts ADD COLUMN volume TEXT;
ALTER TABLE gc_receipts ADD COLUMN volume_policy TEXT;
