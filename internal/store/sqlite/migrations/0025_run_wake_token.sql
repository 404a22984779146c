-- The task token of a queued run's parked execution (store.RunParking):
-- the worker that ends the thread's current run wakes it.
ALTER TABLE runs ADD COLUMN wake_token TEXT NOT NULL DEFAULT '';
