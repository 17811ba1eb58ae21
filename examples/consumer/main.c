/* main.c - an smx consumer in plain C99: softmax over the rows of a 4x10 float matrix on the CPU,
 * then checks that each row of the result is a probability distribution. Exit status 0 means it is. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <smx/smx.h>

#define ROWS 4
#define COLS 10

/* Stops the program with smx's own explanation of a failed call. */
static void check(smxStatus_t status, const char* call) {
    if (status != SMX_STATUS_SUCCESS) {
        fprintf(stderr, "%s failed: %s (%s)\n", call, smxGetStatusString(status), smxGetLastErrorMessage());
        exit(1);
    }
}

int main(void) {
    if (smxGetVersion() != SMX_VERSION) {
        fprintf(stderr, "compiled against smx %d but loaded %d\n", SMX_VERSION, smxGetVersion());
        return 1;
    }

    float x[ROWS * COLS];
    float y[ROWS * COLS];
    unsigned state = 12345u; /* a fixed-seed LCG: values spread over [-8, 8), different in every row */
    for (int i = 0; i < ROWS * COLS; ++i) {
        state = state * 1664525u + 1013904223u;
        x[i] = (float)(state >> 8) / (float)(1u << 24) * 16.0f - 8.0f;
        y[i] = NAN; /* poisoned: a row the library failed to write cannot sum to 1 */
    }

    const int64_t shape[2] = {ROWS, COLS};
    smxHandle_t handle = NULL;
    smxTensorDescriptor_t tensor = NULL;
    smxSoftmaxDescriptor_t softmax = NULL;
    check(smxCreate(&handle, SMX_DEVICE_CPU, 0), "smxCreate");
    check(smxCreateTensorDescriptor(&tensor, SMX_DTYPE_F32, 2, shape, NULL), "smxCreateTensorDescriptor");
    check(smxCreateSoftmaxDescriptor(handle, &softmax, SMX_SOFTMAX, -1, tensor, tensor), "smxCreateSoftmaxDescriptor");

    size_t workspace_bytes = 0;
    check(smxGetSoftmaxWorkspaceSize(softmax, &workspace_bytes), "smxGetSoftmaxWorkspaceSize");
    void* workspace = workspace_bytes > 0 ? malloc(workspace_bytes) : NULL;
    if (workspace_bytes > 0 && workspace == NULL) return 1;
    check(smxSoftmaxForward(softmax, workspace, workspace_bytes, y, x, NULL), "smxSoftmaxForward");

    const char* plan = NULL;
    check(smxGetSoftmaxPlan(softmax, &plan), "smxGetSoftmaxPlan");
    printf("smx %d.%d.%d, plan: %s\n", SMX_VERSION_MAJOR, SMX_VERSION_MINOR, SMX_VERSION_PATCH, plan);
    int failures = 0;
    for (int r = 0; r < ROWS; ++r) {
        double sum = 0.0;
        for (int c = 0; c < COLS; ++c) {
            const float p = y[r * COLS + c];
            if (!(p > 0.0f && p <= 1.0f)) ++failures; /* also catches NaN */
            sum += p;
        }
        if (!(fabs(sum - 1.0) <= 1e-5)) {
            fprintf(stderr, "row %d sums to %.9f, not 1\n", r, sum);
            ++failures;
        }
    }

    free(workspace);
    check(smxDestroySoftmaxDescriptor(softmax), "smxDestroySoftmaxDescriptor");
    check(smxDestroyTensorDescriptor(tensor), "smxDestroyTensorDescriptor");
    check(smxDestroy(handle), "smxDestroy");
    if (failures > 0) return 1;
    printf("%d rows of softmax, each sums to 1\n", ROWS);
    return 0;
}
