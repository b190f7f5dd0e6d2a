// SPDX-License-Identifier: GPL-2.0 OR MIT
/*
 * Stream capture: knowing, without a driver call per launch, that no CUDA
 * graph is being captured.
 *
 * A delivery enqueued on a stream being captured would become a node of the
 * program's graph (and a failed one would invalidate the capture), so such
 * launches get none.  Asking the driver (cuStreamIsCapturing) before every
 * launch is correct but costs a driver call per launch.  Instead libdeepum
 * counts the captures begun through its hooks and not yet ended, and asks
 * the driver only while that count is not zero.  While it is, every launch
 * asks about its own stream, which also covers what the count alone cannot
 * tell: streams that joined a capture by waiting on an event recorded in a
 * capturing stream, and the legacy default stream, which the driver refuses
 * to use (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) while a blocking stream of the
 * context captures.  Capture modes (global, thread-local, relaxed) govern
 * which *other* calls are legal during a capture; libdeepum's launch path
 * makes none of those (the launch page is never created while a capture may
 * be in progress, delivery.c).
 *
 * Errors only ever lean towards asking:
 *   - the count goes up before the real cuStreamBeginCapture* call (and back
 *     down if it fails), so a launch ordered after the capture began sees it;
 *   - it goes down only after a cuStreamEndCapture* that ended the capture
 *     (success, or the capture had been invalidated) and left the stream not
 *     capturing; a capture abandoned without an end keeps libdeepum asking;
 *   - a cuGetProcAddress answer libdeepum does not recognise (a newer ABI of
 *     a hooked API, counted as getproc_unmatched) means a capture could
 *     begin unseen: every launch asks from then on.
 */
#include "deepum_user.h"

static _Atomic u32 captures_open;
static _Atomic bool tracking_lost;

bool capture_in_progress(void)
{
	return atomic_load_explicit(&captures_open, memory_order_acquire) != 0;
}

bool capture_possible(void)
{
	return capture_in_progress() || atomic_load_explicit(&tracking_lost, memory_order_relaxed);
}

void capture_tracking_lost(void)
{
	atomic_store(&tracking_lost, true);
}

bool capture_stream_capturing(CUstream stream)
{
	CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;

	return REAL(cuStreamIsCapturing)(stream, &status) != CUDA_SUCCESS ||
	       status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static void capture_beginning(void)
{
	atomic_fetch_add(&captures_open, 1);
}

static CUresult capture_begun(CUresult rc)
{
	if (rc != CUDA_SUCCESS)
		atomic_fetch_sub(&captures_open, 1);
	return rc;
}

CUresult on_begin_capture_v1(enum deepum_entry which, cuStreamBeginCapture_fn real, CUstream stream)
{
	(void)which;
	capture_beginning();
	return capture_begun(real(stream));
}

CUresult on_begin_capture(enum deepum_entry which, cuStreamBeginCapture_v2_fn real, CUstream stream,
			  CUstreamCaptureMode mode)
{
	(void)which;
	capture_beginning();
	return capture_begun(real(stream, mode));
}

CUresult on_begin_capture_to_graph(enum deepum_entry which, cuStreamBeginCaptureToGraph_fn real,
				   UNPAREN(BEGIN_CAPTURE_TO_GRAPH_PARAMS))
{
	(void)which;
	capture_beginning();
	return capture_begun(real(UNPAREN(BEGIN_CAPTURE_TO_GRAPH_ARGS)));
}

CUresult on_end_capture(enum deepum_entry which, cuStreamEndCapture_fn real, CUstream stream, CUgraph *graph)
{
	/* The stream as cuStreamIsCapturing (a legacy-stream entry point) names it. */
	CUstream named = !stream && deepum_entry_stream[which] == STREAM_PER_THREAD ? CU_STREAM_PER_THREAD : stream;
	CUresult rc = real(stream, graph);

	/* A call that did not end a capture (wrong stream, wrong thread, no
	 * capture) fails otherwise; the status check guards the count against
	 * a driver that says more than the documentation. */
	if ((rc == CUDA_SUCCESS || rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) && !capture_stream_capturing(named))
		atomic_fetch_sub(&captures_open, 1);
	return rc;
}
