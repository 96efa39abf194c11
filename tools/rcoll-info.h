/*
 * rcoll-info.h - the parts of rcoll-info that live in their own files.
 */
#ifndef RCOLL_TOOLS_INFO_H
#define RCOLL_TOOLS_INFO_H

/* `rcoll-info --project N ...` (rcoll-info-project.c): the whole command line; exit status. */
int rcoll_info_project(int argc, char **argv);

#endif
