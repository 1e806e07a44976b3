/* A session's state as an image (src/kv/image.h), for files and the prefix cache. Internal. */
#ifndef HALO_KV_SESSION_STATE_H
#define HALO_KV_SESSION_STATE_H

#include "halo/cache.h"
#include "kv/file.h"

/* Copies the session's tokens, state and checkpoints (rebuilding a broken session first). */
halo_status halo_session_capture(halo_session *s, halo_kv_image **out, halo_error *err);
/* Makes the session hold the image's state at checkpoint `at` and its tokens up to there. On
 * failure the session is reset to position 0. */
halo_status halo_session_apply(halo_session *s, const halo_kv_image *img, uint32_t at,
                               halo_error *err);
/* Where a rewind of s to position p starts re-evaluating (p itself when nothing is redone). */
int64_t halo_session_resume_point(const halo_session *s, uint32_t p);
/* For evaluation paths outside halo_session_eval (halo_session_eval_many): the tokens the
 * session can take before its next checkpoint position, and the call to make after a step
 * (takes the checkpoint when the session stands on that position). */
uint32_t halo_session_checkpoint_room(const halo_session *s);
void halo_session_checkpoint_if_due(halo_session *s);
void halo_engine_identify(const halo_engine *e, halo_kv_file_id *id);
/* The session's state buffer (for reading files against its shapes). */
const halo_kv *halo_session_kv(const halo_session *s);

#endif
