/* hippo-gpu-bench.c -- placeholder, being written (issue 10). */
int main(void) { return 0; }
