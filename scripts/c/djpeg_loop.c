/* The JPEG decode limit for docs/benchmarks.md: libjpeg-turbo decoding the same files to RGB in
 * a tight loop on T threads (its defaults, as Pillow uses it: ISLOW IDCT, fancy upsampling).
 *
 *   gcc -O2 -pthread djpeg_loop.c -ljpeg -o djpeg_loop
 *   ./djpeg_loop THREADS ROUNDS FILE...        prints "images/s N"
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <jpeglib.h>

static unsigned char **data;
static unsigned long *sizes;
static int nfiles, rounds, threads;

static void *work(void *arg) {
    long id = (long)arg;
    struct jpeg_decompress_struct cinfo;
    struct jpeg_error_mgr jerr;
    cinfo.err = jpeg_std_error(&jerr);
    jpeg_create_decompress(&cinfo);
    unsigned char *row = malloc(3 * 65536);
    for (int r = 0; r < rounds; r++) {
        for (int i = (int)id; i < nfiles; i += threads) {
            jpeg_mem_src(&cinfo, data[i], sizes[i]);
            jpeg_read_header(&cinfo, TRUE);
            cinfo.out_color_space = JCS_RGB;
            unsigned char *pixels = malloc((size_t)cinfo.image_width * cinfo.image_height * 3);
            jpeg_start_decompress(&cinfo);
            while (cinfo.output_scanline < cinfo.output_height) {
                unsigned char *at = pixels + (size_t)cinfo.output_scanline * cinfo.output_width * 3;
                jpeg_read_scanlines(&cinfo, &at, 1);
            }
            jpeg_finish_decompress(&cinfo);
            free(pixels);
        }
    }
    free(row);
    jpeg_destroy_decompress(&cinfo);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s THREADS ROUNDS FILE...\n", argv[0]);
        return 2;
    }
    threads = atoi(argv[1]);
    rounds = atoi(argv[2]);
    nfiles = argc - 3;
    data = malloc(sizeof *data * nfiles);
    sizes = malloc(sizeof *sizes * nfiles);
    for (int i = 0; i < nfiles; i++) {
        FILE *f = fopen(argv[3 + i], "rb");
        if (!f) { perror(argv[3 + i]); return 2; }
        fseek(f, 0, SEEK_END);
        sizes[i] = (unsigned long)ftell(f);
        fseek(f, 0, SEEK_SET);
        data[i] = malloc(sizes[i]);
        if (fread(data[i], 1, sizes[i], f) != sizes[i]) { perror("read"); return 2; }
        fclose(f);
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t *ts = malloc(sizeof *ts * threads);
    for (long t = 0; t < threads; t++) pthread_create(&ts[t], NULL, work, (void *)t);
    for (int t = 0; t < threads; t++) pthread_join(ts[t], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("images/s %.1f\n", (double)nfiles * rounds / secs);
    return 0;
}
