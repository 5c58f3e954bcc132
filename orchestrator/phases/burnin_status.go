package phases

import "time"

// BurninProgress is what a node journaled of its burn-in so far (noted:
// its notes by key, as `gpuaccept status` reads them from the journal):
// the runs it finished, the load time they took (a resumed window's
// included: the notes of the try before it carry over), and why it
// failed ("" unless it did).
func BurninProgress(noted func(key string) string) (runs int, done time.Duration, failed string) {
	_, total, done := burninNotedAll(noted)
	return total, done, noted(burninFailedKey)
}
