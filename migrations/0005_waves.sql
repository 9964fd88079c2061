-- Release in waves: how many waves of its stock a product row holds
-- (products.stock starts with wave 1's share; each later wave is added,
-- once, by a conditional UPDATE when it comes due; see src/waves.rs).
ALTER TABLE products ADD COLUMN IF NOT EXISTS waves_released INT NOT NULL DEFAULT 1;
