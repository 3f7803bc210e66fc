package resources

import "maps"

// merge returns the union of user and ours; ours win on a clash.
func merge(user, ours map[string]string) map[string]string {
	out := make(map[string]string, len(user)+len(ours))
	maps.Copy(out, user)
	maps.Copy(out, ours)
	return out
}
