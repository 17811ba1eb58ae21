/* c_api_test.c - the C API used from C99: a CPU handle, descriptors, softmax and log-softmax of a small
 * tensor checked against a plain double computation, the softmax backward of it checked the same way, one
 * call of each log-probability operator, one refusal with its message, and clean teardown.
 * Exits 0 when every check passes, 1 otherwise (CTest: smx_c_api). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "smx/smx.h"

#define ROWS 3
#define ROW_LEN 7

static int g_failures = 0;

/* Records a failed check with its line, and keeps going so one run reports every failure. */
#define CHECK(condition)                                                      \
    do {                                                                      \
        if (!(condition)) {                                                   \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
            ++g_failures;                                                     \
        }                                                                     \
    } while (0)

/* Stops the test when a call that everything else depends on fails. */
#define REQUIRE_OK(call)                                                                              \
    do {                                                                                              \
        smxStatus_t status_ = (call);                                                                 \
        if (status_ != SMX_STATUS_SUCCESS) {                                                          \
            fprintf(stderr, "%s:%d: %s failed: %s (%s)\n", __FILE__, __LINE__, #call,                 \
                    smxGetStatusString(status_), smxGetLastErrorMessage());                          \
            exit(1);                                                                                  \
        }                                                                                             \
    } while (0)

/* Softmax (or log-softmax) of each row of x, in double, the simplest way: the reference for this test. */
static void reference(const float* x, double* out, int log_mode) {
    int r, j;
    for (r = 0; r < ROWS; ++r) {
        const float* row = x + r * ROW_LEN;
        double max = row[0], sum = 0.0;
        for (j = 1; j < ROW_LEN; ++j) max = row[j] > max ? row[j] : max;
        for (j = 0; j < ROW_LEN; ++j) sum += exp(row[j] - max);
        for (j = 0; j < ROW_LEN; ++j) {
            out[r * ROW_LEN + j] = log_mode ? (row[j] - max) - log(sum) : exp(row[j] - max) / sum;
        }
    }
}

/* Runs one mode on a poisoned y and compares it with the reference within float32's tolerance. */
static void check_mode(smxHandle_t handle, smxTensorDescriptor_t desc, const float* x, smxSoftmaxMode_t mode) {
    smxSoftmaxDescriptor_t softmax = NULL;
    size_t workspace_bytes = 1;
    const char* plan = NULL;
    float y[ROWS * ROW_LEN];
    double expected[ROWS * ROW_LEN];
    int i;
    const int log_mode = mode == SMX_LOG_SOFTMAX;

    REQUIRE_OK(smxCreateSoftmaxDescriptor(handle, &softmax, mode, -1, desc, desc));
    REQUIRE_OK(smxGetSoftmaxWorkspaceSize(softmax, &workspace_bytes));
    CHECK(workspace_bytes == 0);
    REQUIRE_OK(smxGetSoftmaxPlan(softmax, &plan));
    CHECK(plan != NULL && strlen(plan) > 0);

    memset(y, 0xFF, sizeof y); /* NaN in every element: an unwritten one shows */
    REQUIRE_OK(smxSoftmaxForward(softmax, NULL, 0, y, x, NULL));
    reference(x, expected, log_mode);
    for (i = 0; i < ROWS * ROW_LEN; ++i) {
        const double allowed = 1e-5 * (fabs(expected[i]) + (log_mode ? 1.0 : 0.0)) + 1e-30;
        if (!(fabs(y[i] - expected[i]) <= allowed)) {
            fprintf(stderr, "%s element %d: got %.9g, expected %.9g\n", log_mode ? "log_softmax" : "softmax", i,
                    (double)y[i], expected[i]);
            ++g_failures;
        }
    }
    CHECK(smxDestroySoftmaxDescriptor(softmax) == SMX_STATUS_SUCCESS);
}

/* The softmax backward of y = softmax(x): dx = y * (dy - sum(dy * y)) per row, against the same formula in
 * double, within float32's tolerance relative to the terms it is made of. */
static void check_backward(smxHandle_t handle, smxTensorDescriptor_t desc, const float* x) {
    smxSoftmaxDescriptor_t softmax = NULL;
    smxSoftmaxBackwardDescriptor_t backward = NULL;
    size_t workspace_bytes = 1;
    float y[ROWS * ROW_LEN], dy[ROWS * ROW_LEN], dx[ROWS * ROW_LEN];
    int r, j;

    REQUIRE_OK(smxCreateSoftmaxDescriptor(handle, &softmax, SMX_SOFTMAX, -1, desc, desc));
    REQUIRE_OK(smxSoftmaxForward(softmax, NULL, 0, y, x, NULL));
    for (j = 0; j < ROWS * ROW_LEN; ++j) dy[j] = (float)((rand() % 2001 - 1000) / 100.0 + 0.005);

    REQUIRE_OK(smxCreateSoftmaxBackwardDescriptor(handle, &backward, SMX_SOFTMAX, -1, desc, desc, desc));
    REQUIRE_OK(smxGetSoftmaxBackwardWorkspaceSize(backward, &workspace_bytes));
    CHECK(workspace_bytes == 0);
    memset(dx, 0xFF, sizeof dx); /* NaN in every element: an unwritten one shows */
    REQUIRE_OK(smxSoftmaxBackward(backward, NULL, 0, dx, dy, y, NULL));
    for (r = 0; r < ROWS; ++r) {
        double sum = 0.0, abs_sum = 0.0;
        for (j = 0; j < ROW_LEN; ++j) {
            sum += (double)dy[r * ROW_LEN + j] * y[r * ROW_LEN + j];
            abs_sum += fabs((double)dy[r * ROW_LEN + j] * y[r * ROW_LEN + j]);
        }
        for (j = 0; j < ROW_LEN; ++j) {
            const int i = r * ROW_LEN + j;
            const double expected = y[i] * (dy[i] - sum);
            const double allowed = 1e-5 * fabs(y[i]) * (fabs(dy[i]) + abs_sum) + 1e-30;
            if (!(fabs(dx[i] - expected) <= allowed)) {
                fprintf(stderr, "softmax backward element %d: got %.9g, expected %.9g\n", i, (double)dx[i], expected);
                ++g_failures;
            }
        }
    }
    CHECK(smxDestroySoftmaxBackwardDescriptor(backward) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroySoftmaxDescriptor(softmax) == SMX_STATUS_SUCCESS);
}

/* Logsumexp, log-softmax gather and a mean cross-entropy with its dlogits, one call each, against the log-softmax
 * reference: logsumexp = x - log_softmax(x) at any element; the loss is the mean of -log_softmax at the targets. */
static void check_log_probabilities(smxHandle_t handle, smxTensorDescriptor_t desc, const float* x) {
    const int64_t rows_shape[1] = {ROWS};
    const int64_t gathered_shape[2] = {ROWS, 2};
    const int64_t one[1] = {1};
    smxTensorDescriptor_t rows_f32 = NULL, rows_i64 = NULL, gathered_f32 = NULL, gathered_i64 = NULL, loss_desc = NULL;
    smxLogsumexpDescriptor_t logsumexp = NULL;
    smxLogSoftmaxGatherDescriptor_t gather = NULL;
    smxCrossEntropyDescriptor_t cross_entropy = NULL;
    smxCrossEntropyOptions_t options = SMX_CROSS_ENTROPY_OPTIONS_INIT;
    double logp[ROWS * ROW_LEN], expected_loss = 0.0;
    void* workspace = NULL;
    float lse[ROWS], gathered[ROWS * 2], loss, dlogits[ROWS * ROW_LEN];
    int64_t index[ROWS * 2], target[ROWS];
    size_t workspace_bytes = 0;
    int r, j;

    reference(x, logp, 1);
    for (r = 0; r < ROWS; ++r) {
        index[2 * r] = r % ROW_LEN;
        index[2 * r + 1] = ROW_LEN;  /* out of range: +inf */
        target[r] = (2 * r + 1) % ROW_LEN;
        expected_loss -= logp[r * ROW_LEN + target[r]] / ROWS;
    }
    REQUIRE_OK(smxCreateTensorDescriptor(&rows_f32, SMX_DTYPE_F32, 1, rows_shape, NULL));
    REQUIRE_OK(smxCreateTensorDescriptor(&rows_i64, SMX_DTYPE_I64, 1, rows_shape, NULL));
    REQUIRE_OK(smxCreateTensorDescriptor(&gathered_f32, SMX_DTYPE_F32, 2, gathered_shape, NULL));
    REQUIRE_OK(smxCreateTensorDescriptor(&gathered_i64, SMX_DTYPE_I64, 2, gathered_shape, NULL));
    REQUIRE_OK(smxCreateTensorDescriptor(&loss_desc, SMX_DTYPE_F32, 1, one, NULL));

    REQUIRE_OK(smxCreateLogsumexpDescriptor(handle, &logsumexp, -1, rows_f32, desc));
    memset(lse, 0xFF, sizeof lse);
    REQUIRE_OK(smxLogsumexp(logsumexp, NULL, 0, lse, x, NULL));
    REQUIRE_OK(smxCreateLogSoftmaxGatherDescriptor(handle, &gather, -1, gathered_f32, desc, gathered_i64));
    memset(gathered, 0xFF, sizeof gathered);
    REQUIRE_OK(smxLogSoftmaxGather(gather, NULL, 0, gathered, x, index, NULL));
    REQUIRE_OK(smxCreateCrossEntropyDescriptor(handle, &cross_entropy, -1, &options, loss_desc, NULL, desc, desc, rows_i64));
    REQUIRE_OK(smxGetCrossEntropyWorkspaceSize(cross_entropy, &workspace_bytes));
    workspace = malloc(workspace_bytes); /* malloc's alignment is at least the 16 bytes a workspace needs */
    CHECK(workspace_bytes == 0 || workspace != NULL);
    memset(dlogits, 0xFF, sizeof dlogits);
    REQUIRE_OK(smxCrossEntropy(cross_entropy, workspace, workspace_bytes, &loss, NULL, dlogits, x, target, NULL));

    for (r = 0; r < ROWS; ++r) {
        const double row_lse = x[r * ROW_LEN] - logp[r * ROW_LEN];
        CHECK(fabs(lse[r] - row_lse) <= 1e-5 * (fabs(row_lse) + 1.0));
        CHECK(fabs(gathered[2 * r] - logp[r * ROW_LEN + index[2 * r]]) <= 1e-5 * (fabs(gathered[2 * r]) + 1.0));
        CHECK(isinf(gathered[2 * r + 1]) && gathered[2 * r + 1] > 0);
        for (j = 0; j < ROW_LEN; ++j) {
            const double grad = (exp(logp[r * ROW_LEN + j]) - (j == target[r] ? 1.0 : 0.0)) / ROWS;
            CHECK(fabs(dlogits[r * ROW_LEN + j] - grad) <= 1e-5 * (fabs(grad) + 1e-3));
        }
    }
    CHECK(fabs(loss - expected_loss) <= 1e-5 * (fabs(expected_loss) + 1.0));

    free(workspace);
    CHECK(smxDestroyCrossEntropyDescriptor(cross_entropy) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroyLogSoftmaxGatherDescriptor(gather) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroyLogsumexpDescriptor(logsumexp) == SMX_STATUS_SUCCESS);
    smxDestroyTensorDescriptor(rows_f32);
    smxDestroyTensorDescriptor(rows_i64);
    smxDestroyTensorDescriptor(gathered_f32);
    smxDestroyTensorDescriptor(gathered_i64);
    smxDestroyTensorDescriptor(loss_desc);
}

/* Log-softmax and logsumexp of x's rows split between two ranks (columns [0, 4) and [4, ROW_LEN), views of x),
 * each rank's statistics written into its block of the gathered tensor, against the log-softmax reference. */
static void check_vocab_parallel(smxHandle_t handle, const float* x) {
    const int64_t full_strides[2] = {ROW_LEN, 1};
    const int64_t shard_shape[2][2] = {{ROWS, 4}, {ROWS, ROW_LEN - 4}};
    const int64_t stats_strides[2] = {1, ROWS}; /* statistics axis outermost: each rank's block contiguous */
    const int64_t local_shape[2] = {ROWS, SMX_SHARD_SOFTMAX_STATISTICS};
    const int64_t gathered_shape[2] = {ROWS, 2 * SMX_SHARD_SOFTMAX_STATISTICS};
    const int64_t rows_shape[1] = {ROWS};
    smxTensorDescriptor_t shard[2] = {NULL, NULL}, local = NULL, gathered = NULL, rows = NULL;
    smxShardStatisticsDescriptor_t statistics = NULL;
    smxShardSoftmaxDescriptor_t normalize = NULL;
    smxShardLogsumexpDescriptor_t logsumexp = NULL;
    float stats[ROWS * 2 * SMX_SHARD_SOFTMAX_STATISTICS], y[ROWS * ROW_LEN], lse[ROWS];
    double logp[ROWS * ROW_LEN];
    int rank, r, j;

    reference(x, logp, 1);
    REQUIRE_OK(smxCreateTensorDescriptor(&local, SMX_DTYPE_F32, 2, local_shape, stats_strides));
    REQUIRE_OK(smxCreateTensorDescriptor(&gathered, SMX_DTYPE_F32, 2, gathered_shape, stats_strides));
    REQUIRE_OK(smxCreateTensorDescriptor(&rows, SMX_DTYPE_F32, 1, rows_shape, NULL));
    memset(stats, 0xFF, sizeof stats);
    memset(y, 0xFF, sizeof y);
    for (rank = 0; rank < 2; ++rank) {
        REQUIRE_OK(smxCreateTensorDescriptor(&shard[rank], SMX_DTYPE_F32, 2, shard_shape[rank], full_strides));
        REQUIRE_OK(smxCreateShardStatisticsDescriptor(handle, &statistics, -1, 0, local, shard[rank], NULL));
        REQUIRE_OK(smxShardStatistics(statistics, NULL, 0, stats + rank * ROWS * SMX_SHARD_SOFTMAX_STATISTICS,
                                      x + rank * 4, NULL, NULL));
        CHECK(smxDestroyShardStatisticsDescriptor(statistics) == SMX_STATUS_SUCCESS);
    }
    for (rank = 0; rank < 2; ++rank) {
        REQUIRE_OK(smxCreateShardSoftmaxDescriptor(handle, &normalize, SMX_LOG_SOFTMAX, -1, shard[rank], shard[rank],
                                                   gathered));
        REQUIRE_OK(smxShardSoftmax(normalize, NULL, 0, y + rank * 4, x + rank * 4, stats, NULL));
        CHECK(smxDestroyShardSoftmaxDescriptor(normalize) == SMX_STATUS_SUCCESS);
    }
    REQUIRE_OK(smxCreateShardLogsumexpDescriptor(handle, &logsumexp, -1, rows, gathered));
    REQUIRE_OK(smxShardLogsumexp(logsumexp, NULL, 0, lse, stats, NULL));

    for (r = 0; r < ROWS; ++r) {
        const double row_lse = x[r * ROW_LEN] - logp[r * ROW_LEN];
        CHECK(fabs(lse[r] - row_lse) <= 1e-5 * (fabs(row_lse) + 1.0));
        for (j = 0; j < ROW_LEN; ++j) {
            const double expected = logp[r * ROW_LEN + j];
            CHECK(fabs(y[r * ROW_LEN + j] - expected) <= 1e-5 * (fabs(expected) + 1.0));
        }
    }
    CHECK(smxDestroyShardLogsumexpDescriptor(logsumexp) == SMX_STATUS_SUCCESS);
    smxDestroyTensorDescriptor(shard[0]);
    smxDestroyTensorDescriptor(shard[1]);
    smxDestroyTensorDescriptor(local);
    smxDestroyTensorDescriptor(gathered);
    smxDestroyTensorDescriptor(rows);
}

int main(void) {
    smxHandle_t handle = NULL;
    smxTensorDescriptor_t desc = NULL;
    smxSoftmaxDescriptor_t refused = NULL;
    const int64_t shape[2] = {ROWS, ROW_LEN};
    float x[ROWS * ROW_LEN];
    int i;

    /* Fresh values each run, never zero, spread over a few units so the rows are far from uniform. */
    srand((unsigned)time(NULL));
    for (i = 0; i < ROWS * ROW_LEN; ++i) x[i] = (float)((rand() % 2001 - 1000) / 100.0 + 0.005);

    CHECK(smxGetVersion() == SMX_VERSION);
    REQUIRE_OK(smxCreate(&handle, SMX_DEVICE_CPU, 0));
    REQUIRE_OK(smxCreateTensorDescriptor(&desc, SMX_DTYPE_F32, 2, shape, NULL));

    check_mode(handle, desc, x, SMX_SOFTMAX);
    check_mode(handle, desc, x, SMX_LOG_SOFTMAX);
    check_backward(handle, desc, x);
    check_log_probabilities(handle, desc, x);
    check_vocab_parallel(handle, x);

    /* One refusal: axis 2 of a 2-d tensor, with its status, its category and a message naming the axis. */
    CHECK(smxCreateSoftmaxDescriptor(handle, &refused, SMX_SOFTMAX, 2, desc, desc) == SMX_STATUS_BAD_PARAM_AXIS);
    CHECK(refused == NULL);
    CHECK(SMX_STATUS_CATEGORY(SMX_STATUS_BAD_PARAM_AXIS) == SMX_STATUS_BAD_PARAM);
    CHECK(strstr(smxGetLastErrorMessage(), "axis 2 out of range for a 2-d tensor") != NULL);
    CHECK(strncmp(smxGetStatusString(SMX_STATUS_BAD_PARAM_AXIS), "SMX_STATUS_BAD_PARAM_AXIS", 25) == 0);

    CHECK(smxDestroyTensorDescriptor(desc) == SMX_STATUS_SUCCESS);
    CHECK(smxDestroy(handle) == SMX_STATUS_SUCCESS);

    if (g_failures > 0) {
        fprintf(stderr, "smx C API test: %d check(s) failed\n", g_failures);
        return 1;
    }
    printf("smx C API test: all checks passed\n");
    return 0;
}
