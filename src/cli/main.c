#include <stdio.h>
int main(void) { puts("halo"); return 0; }
